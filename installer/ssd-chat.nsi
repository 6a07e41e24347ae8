; ssd-chat per-user installer (no admin rights).
;
; Packages the PyInstaller onedir folder into ssd-chat-<version>-setup.exe, installing to
; %LOCALAPPDATA%\Programs\ssd-chat with Start-menu and desktop shortcuts and an entry in
; Add/Remove Programs (HKCU). The uninstaller keeps conversations and models (the platformdirs
; user data dir %LOCALAPPDATA%\ssd-chat) unless the user ticks "also delete", or passes /DELETEDATA.
;
; Built by installer/build.py; by hand:
;   makensis -DVERSION=0.1.0 -DSRCDIR=dist/ssd-chat -DOUTFILE=dist/ssd-chat-0.1.0-setup.exe installer/ssd-chat.nsi
; VERSION and SRCDIR are required; OUTFILE defaults to ssd-chat-${VERSION}-setup.exe next to this file;
; VIVERSION (four numbers, e.g. 0.1.0.0) adds Windows version info to the setup exe.

Unicode true
SetCompressor /SOLID lzma

!ifndef VERSION
  !error "pass the version from pyproject.toml: makensis -DVERSION=x.y.z (installer/build.py does this)"
!endif
!ifndef SRCDIR
  !error "pass the PyInstaller output folder: makensis -DSRCDIR=dist/ssd-chat"
!endif
!ifndef OUTFILE
  !define OUTFILE "ssd-chat-${VERSION}-setup.exe"
!endif

!define APPNAME "ssd-chat"
!define PUBLISHER "ssd-chat developers"
!define APPEXE "ssd-chat.exe"
!define UNINSTEXE "uninstall.exe"
!define UNINSTKEY "Software\Microsoft\Windows\CurrentVersion\Uninstall\${APPNAME}"
!define SETTINGSKEY "Software\${APPNAME}"

!include "MUI2.nsh"
!include "nsDialogs.nsh"
!include "LogicLib.nsh"
!include "FileFunc.nsh"

Name "${APPNAME} ${VERSION}"
OutFile "${OUTFILE}"
RequestExecutionLevel user
InstallDir "$LOCALAPPDATA\Programs\${APPNAME}"
InstallDirRegKey HKCU "${SETTINGSKEY}" "InstallDir"
ShowInstDetails show
ShowUninstDetails show

!ifdef VIVERSION
  VIProductVersion "${VIVERSION}"
  VIFileVersion "${VIVERSION}"
  VIAddVersionKey "ProductName" "${APPNAME}"
  VIAddVersionKey "ProductVersion" "${VERSION}"
  VIAddVersionKey "FileVersion" "${VERSION}"
  VIAddVersionKey "FileDescription" "${APPNAME} installer"
  VIAddVersionKey "CompanyName" "${PUBLISHER}"
  VIAddVersionKey "LegalCopyright" "MIT licence"
!endif

!define MUI_ABORTWARNING
!define MUI_FINISHPAGE_RUN "$INSTDIR\${APPEXE}"
!define MUI_FINISHPAGE_RUN_TEXT "Start ${APPNAME}"

!insertmacro MUI_PAGE_WELCOME
!insertmacro MUI_PAGE_DIRECTORY
!insertmacro MUI_PAGE_INSTFILES
!insertmacro MUI_PAGE_FINISH

!insertmacro MUI_UNPAGE_CONFIRM
UninstPage custom un.DataPageShow un.DataPageLeave
!insertmacro MUI_UNPAGE_INSTFILES

!insertmacro MUI_LANGUAGE "English"

Var DeleteData          ; 1: the uninstaller also removes the user data folder
Var DeleteDataCheckbox

Function .onInit
  SetShellVarContext current
FunctionEnd

Section "ssd-chat" SecMain
  SectionIn RO
  SetOutPath "$INSTDIR"
  ; A reinstall or upgrade replaces the bundle wholesale, so no stale libraries from an older
  ; version linger next to the new ones.
  RMDir /r "$INSTDIR\_internal"
  File /r "${SRCDIR}/*"

  WriteUninstaller "$INSTDIR\${UNINSTEXE}"
  WriteRegStr HKCU "${SETTINGSKEY}" "InstallDir" "$INSTDIR"

  CreateShortcut "$SMPROGRAMS\${APPNAME}.lnk" "$INSTDIR\${APPEXE}" "" "$INSTDIR\${APPEXE}" 0
  CreateShortcut "$DESKTOP\${APPNAME}.lnk" "$INSTDIR\${APPEXE}" "" "$INSTDIR\${APPEXE}" 0

  WriteRegStr HKCU "${UNINSTKEY}" "DisplayName" "${APPNAME}"
  WriteRegStr HKCU "${UNINSTKEY}" "DisplayVersion" "${VERSION}"
  WriteRegStr HKCU "${UNINSTKEY}" "Publisher" "${PUBLISHER}"
  WriteRegStr HKCU "${UNINSTKEY}" "DisplayIcon" "$INSTDIR\${APPEXE}"
  WriteRegStr HKCU "${UNINSTKEY}" "InstallLocation" "$INSTDIR"
  WriteRegStr HKCU "${UNINSTKEY}" "UninstallString" '"$INSTDIR\${UNINSTEXE}"'
  WriteRegStr HKCU "${UNINSTKEY}" "QuietUninstallString" '"$INSTDIR\${UNINSTEXE}" /S'
  WriteRegDWORD HKCU "${UNINSTKEY}" "NoModify" 1
  WriteRegDWORD HKCU "${UNINSTKEY}" "NoRepair" 1
  ${GetSize} "$INSTDIR" "/S=0K" $0 $1 $2
  IntFmt $0 "0x%08X" $0
  WriteRegDWORD HKCU "${UNINSTKEY}" "EstimatedSize" "$0"
SectionEnd

; --- uninstaller -------------------------------------------------------------------------------

Function un.onInit
  SetShellVarContext current
  StrCpy $DeleteData 0
  ; Silent or scripted uninstalls: "uninstall.exe /S /DELETEDATA" also removes the user data.
  ${GetParameters} $0
  ClearErrors
  ${GetOptions} $0 "/DELETEDATA" $1
  ${IfNot} ${Errors}
    StrCpy $DeleteData 1
  ${EndIf}
FunctionEnd

Function un.DataPageShow
  !insertmacro MUI_HEADER_TEXT "Your conversations and models" "Choose whether to keep them."
  nsDialogs::Create 1018
  Pop $0
  ${If} $0 == error
    Abort
  ${EndIf}
  ${NSD_CreateLabel} 0 0 100% 36u "ssd-chat keeps your conversations, settings and downloaded models in $LOCALAPPDATA\${APPNAME}. They are kept unless you tick the box, so a later install finds them again."
  Pop $0
  ${NSD_CreateCheckbox} 0 44u 100% 12u "&Also delete my conversations and downloaded models"
  Pop $DeleteDataCheckbox
  ${If} $DeleteData == 1
    ${NSD_Check} $DeleteDataCheckbox
  ${EndIf}
  nsDialogs::Show
FunctionEnd

Function un.DataPageLeave
  ${NSD_GetState} $DeleteDataCheckbox $0
  ${If} $0 == ${BST_CHECKED}
    StrCpy $DeleteData 1
  ${Else}
    StrCpy $DeleteData 0
  ${EndIf}
FunctionEnd

Section "Uninstall"
  Delete "$SMPROGRAMS\${APPNAME}.lnk"
  Delete "$DESKTOP\${APPNAME}.lnk"

  ; Remove only what the installer put there, so a folder chosen by mistake (say, Documents)
  ; does not lose unrelated files; RMDir without /r leaves a non-empty folder alone.
  RMDir /r "$INSTDIR\_internal"
  Delete "$INSTDIR\ssd-chat.exe"
  Delete "$INSTDIR\ssd-chat-cli.exe"
  Delete "$INSTDIR\${UNINSTEXE}"
  RMDir "$INSTDIR"

  ${If} $DeleteData == 1
    DetailPrint "Deleting conversations and models in $LOCALAPPDATA\${APPNAME}"
    RMDir /r "$LOCALAPPDATA\${APPNAME}"
  ${Else}
    DetailPrint "Keeping conversations and models in $LOCALAPPDATA\${APPNAME}"
  ${EndIf}

  DeleteRegKey HKCU "${UNINSTKEY}"
  DeleteRegKey HKCU "${SETTINGSKEY}"
SectionEnd
